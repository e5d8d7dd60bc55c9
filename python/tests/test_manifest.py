"""pisa.manifest: a library's own manifest wins over the .json beside it;
a library without one falls back to the .json; anything that is not a pisa
manifest of this ABI is refused naming the file."""

import ctypes
import json
import os
import tempfile
import unittest

from pisa import manifest

GOOD = {"abi": manifest.ABI, "entry_points": [
    {"function": "f", "symbol": "pisa_f", "workspace_symbol": "pisa_f_workspace_size",
     "arguments": [], "results": []}]}


class OwnCopy:
    """A library carrying `text` as its pisa_runtime_manifest()."""

    def __init__(self, text):
        self.pisa_runtime_manifest = lambda: text.encode()


class ManifestTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.lib = os.path.join(self.dir.name, "libx.so")

    def tearDown(self):
        self.dir.cleanup()

    def beside(self, text):
        with open(os.path.join(self.dir.name, "libx.json"), "w") as f:
            f.write(text)

    def test_the_library_copy_wins_over_the_file_beside(self):
        self.beside('{"abi": "edited"}')
        m = manifest.read(OwnCopy(json.dumps(GOOD)), self.lib)
        self.assertEqual(m, GOOD)

    def test_a_library_without_a_copy_reads_the_file_beside(self):
        self.beside(json.dumps(GOOD))
        # This process has no pisa_runtime_manifest.
        self.assertEqual(manifest.read(ctypes.CDLL(None), self.lib), GOOD)

    def test_what_is_not_a_manifest_is_refused_naming_the_file(self):
        bad = {
            "{not json": "not a pisa manifest",
            "[1, 2]": "ABI None",
            '{"abi": "pisa-call-v1", "entry_points": []}': "ABI 'pisa-call-v1'",
            json.dumps(dict(GOOD, entry_points={"f": 1})): "entry_points malformed",
            json.dumps(dict(GOOD, entry_points=[{"function": "f"}])): "entry_points malformed",
        }
        for text, why in bad.items():
            with self.assertRaises(RuntimeError) as own:
                manifest.read(OwnCopy(text), self.lib)
            self.assertIn(self.lib, str(own.exception))
            self.assertIn(why, str(own.exception))
            self.beside(text)
            with self.assertRaises(RuntimeError) as file:
                manifest.read(ctypes.CDLL(None), self.lib)
            self.assertIn("libx.json", str(file.exception))
            self.assertIn(why, str(file.exception))


if __name__ == "__main__":
    unittest.main()
