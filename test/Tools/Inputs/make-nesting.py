"""Prints MLIR text nested `depth` levels deep in one of five ways."""
import sys

kind, depth = sys.argv[1], int(sys.argv[2])
if kind == "tuple":
    print("func.func private @f(%a: " + "tuple<" * depth + "i32" + ">" * depth + ")")
elif kind == "region":
    print("func.func @f() {\n" + "scf.execute_region {\n" * depth
          + "scf.yield\n}\n" * depth + "return\n}")
elif kind == "paren":
    print("(" * depth)
elif kind == "list":
    print("func.func private @f() attributes {a = " + "[" * depth + "]" * depth + "}")
elif kind == "dict":
    print("func.func private @f() attributes {a = " + "{b = " * depth + "1"
          + "}" * depth + "}")
