# -*- Python -*-
# Runs the GoogleTest binaries under build/unittests as lit tests.

import os

import lit.formats

config.name = "PISA-Unit"
config.suffixes = []
config.test_exec_root = os.path.join(config.pisa_obj_root, "test", "Unit")
config.test_source_root = config.test_exec_root
config.test_format = lit.formats.GoogleTest(".", "Tests")
