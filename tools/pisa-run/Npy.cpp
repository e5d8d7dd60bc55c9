//===- Npy.cpp - Minimal .npy reader and writer ---------------------------===//

#include "Npy.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cctype>
#include <cstring>

using namespace pisatool::npy;
using llvm::createStringError;
using llvm::StringRef;

const char *pisatool::npy::dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "float32";
  case DType::F16:
    return "float16";
  case DType::I32:
    return "int32";
  }
  return "?";
}

size_t pisatool::npy::dtypeSize(DType dtype) {
  return dtype == DType::F16 ? 2 : 4;
}

int64_t Array::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

static const char kMagic[] = "\x93NUMPY";

namespace {
/// NumPy's header: a Python dict literal with exactly the keys 'descr' (a
/// string), 'fortran_order' (True or False) and 'shape' (a tuple of
/// non-negative integers), each once, then spaces and a newline.
struct Header {
  std::string descr;
  bool fortranOrder = false;
  std::vector<int64_t> shape;
  std::string shapeText;
};

class HeaderParser {
public:
  explicit HeaderParser(StringRef text) : text(text) {}

  llvm::Expected<Header> parse() {
    Header h;
    bool seenDescr = false, seenFortran = false, seenShape = false;
    skip();
    if (!eat('{'))
      return fail("the header is not a dict");
    while (true) {
      skip();
      if (eat('}'))
        break;
      std::string key;
      if (!string(key))
        return fail("expected a quoted key in the header");
      skip();
      if (!eat(':'))
        return fail("expected ':' after '" + key + "'");
      skip();
      bool *seen = key == "descr"           ? &seenDescr
                   : key == "fortran_order" ? &seenFortran
                   : key == "shape"         ? &seenShape
                                            : nullptr;
      if (!seen)
        return fail("unexpected key '" + key + "' in the header");
      if (*seen)
        return fail("key '" + key + "' appears twice in the header");
      *seen = true;
      if (key == "descr" && !string(h.descr))
        return fail("'descr' is not a string");
      if (key == "fortran_order" && !boolean(h.fortranOrder))
        return fail("'fortran_order' is not True or False");
      if (key == "shape") {
        size_t from = at;
        if (llvm::Error err = tuple(h.shape))
          return std::move(err);
        h.shapeText = text.slice(from, at).str();
      }
      skip();
      if (eat(','))
        continue;
      skip();
      if (eat('}'))
        break;
      return fail("expected ',' or '}' in the header");
    }
    skip();
    if (at != text.size())
      return fail("unexpected text after the header's dict");
    for (auto [seen, key] : {std::pair{seenDescr, "descr"},
                             std::pair{seenFortran, "fortran_order"},
                             std::pair{seenShape, "shape"}})
      if (!seen)
        return fail(llvm::Twine("no '") + key + "' in the header");
    return h;
  }

private:
  llvm::Error fail(const llvm::Twine &why) {
    return createStringError(std::errc::invalid_argument, "%s",
                             why.str().c_str());
  }
  void skip() {
    while (at < text.size() && (text[at] == ' ' || text[at] == '\n' ||
                                text[at] == '\t' || text[at] == '\r'))
      ++at;
  }
  bool eat(char c) {
    if (at < text.size() && text[at] == c) {
      ++at;
      return true;
    }
    return false;
  }
  bool string(std::string &out) {
    if (at >= text.size() || (text[at] != '\'' && text[at] != '"'))
      return false;
    char quote = text[at];
    size_t end = text.find(quote, at + 1);
    if (end == StringRef::npos || text.slice(at + 1, end).contains('\\'))
      return false;
    out = text.slice(at + 1, end).str();
    at = end + 1;
    return true;
  }
  bool boolean(bool &out) {
    for (auto [word, value] : {std::pair{"True", true}, {"False", false}})
      if (text.substr(at).starts_with(word)) {
        at += std::strlen(word);
        out = value;
        return true;
      }
    return false;
  }
  llvm::Error tuple(std::vector<int64_t> &shape) {
    if (!eat('('))
      return fail("'shape' is not a tuple");
    while (true) {
      skip();
      if (eat(')'))
        return llvm::Error::success();
      size_t from = at;
      while (at < text.size() && std::isdigit(uint8_t(text[at])))
        ++at;
      int64_t extent;
      if (from == at)
        return fail("'shape' holds something other than non-negative "
                    "integers");
      if (text.slice(from, at).getAsInteger(10, extent) || extent < 0)
        return fail("'shape' has an extent past 2^63 - 1: " +
                    text.slice(from, at));
      shape.push_back(extent);
      skip();
      if (eat(','))
        continue;
      if (eat(')'))
        return llvm::Error::success();
      return fail("expected ',' or ')' in 'shape'");
    }
  }

  StringRef text;
  size_t at = 0;
};
} // namespace

llvm::Expected<Array> pisatool::npy::read(StringRef path) {
  auto cannot = [&](std::error_code ec) {
    return createStringError(ec, "cannot read '%s': %s", path.str().c_str(),
                             ec.message().c_str());
  };
  // Only regular files: a device or a pipe has no size to check the header
  // against (and /dev/zero never ends).
  llvm::sys::fs::file_status st;
  if (std::error_code ec = llvm::sys::fs::status(path, st))
    return cannot(ec);
  if (st.type() != llvm::sys::fs::file_type::regular_file)
    return createStringError(std::errc::invalid_argument,
                             "cannot read '%s': it is not a regular file",
                             path.str().c_str());
  auto bufferOr = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                              /*RequiresNullTerminator=*/false);
  if (!bufferOr)
    return cannot(bufferOr.getError());
  StringRef bytes = (*bufferOr)->getBuffer();
  auto bad = [&](const llvm::Twine &why) {
    return createStringError(std::errc::invalid_argument,
                             "'%s' is not a valid .npy file: %s",
                             path.str().c_str(), why.str().c_str());
  };
  if (bytes.size() < 10 || !bytes.starts_with(StringRef(kMagic, 6)))
    return bad("missing the \\x93NUMPY magic");
  uint8_t major = bytes[6];
  size_t headerLen, headerStart;
  if (major == 1) {
    headerLen = uint8_t(bytes[8]) | (uint8_t(bytes[9]) << 8);
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12)
      return bad("truncated header");
    headerLen = 0;
    for (int i = 0; i < 4; ++i)
      headerLen |= size_t(uint8_t(bytes[8 + i])) << (8 * i);
    headerStart = 12;
  } else {
    return bad("unsupported format version " + llvm::Twine(int(major)));
  }
  if (headerLen > bytes.size() - headerStart)
    return bad("the header's length (" + llvm::Twine(headerLen) +
               " bytes) runs past the end of the file");
  StringRef headerText = bytes.substr(headerStart, headerLen);
  auto header = HeaderParser(headerText).parse();
  if (!header)
    return bad(llvm::toString(header.takeError()));

  Array array;
  StringRef d = header->descr;
  if (d == "<f4")
    array.dtype = DType::F32;
  else if (d == "<f2")
    array.dtype = DType::F16;
  else if (d == "<i4")
    array.dtype = DType::I32;
  else
    return createStringError(
        std::errc::invalid_argument,
        "'%s' has dtype '%s'; expected float32, float16 or "
        "int32 (little-endian)",
        path.str().c_str(), d.str().c_str());
  if (header->fortranOrder)
    return createStringError(std::errc::invalid_argument,
                             "'%s' is in Fortran order; expected C order",
                             path.str().c_str());
  array.shape = header->shape;
  const std::string &shape = header->shapeText;

  // The size in bytes, overflow-checked, against the bytes present.
  size_t payload = bytes.size() - headerStart - headerLen;
  uint64_t needed = dtypeSize(array.dtype);
  bool overflow = false;
  for (int64_t extent : array.shape) {
    if (extent != 0 && needed > UINT64_MAX / uint64_t(extent))
      overflow = true;
    needed *= uint64_t(extent);
  }
  bool empty = llvm::is_contained(array.shape, 0);
  if (empty && payload != 0)
    return bad("shape " + shape + " has no elements but the file holds " +
               llvm::Twine(payload) + " bytes of data");
  if (!empty && (overflow || needed != payload))
    return bad(
        "shape " + shape + " needs " +
        (overflow ? std::string("more than 2^64") : std::to_string(needed)) +
        " bytes of data but the file holds " + llvm::Twine(payload));
  const char *data = bytes.data() + headerStart + headerLen;
  array.data.assign(data, data + payload);
  return array;
}

void pisatool::npy::write(llvm::raw_ostream &os, const Array &array) {
  std::string shape = "(";
  for (int64_t d : array.shape)
    shape += std::to_string(d) + ",";
  if (array.shape.size() > 1)
    shape.pop_back();
  shape += ")";
  const char *descr = array.dtype == DType::I32   ? "<i4"
                      : array.dtype == DType::F16 ? "<f2"
                                                  : "<f4";
  std::string header = "{'descr': '" + std::string(descr) +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad so that magic + version + length + header is a multiple of 64.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';

  os.write(kMagic, 6);
  os << char(1) << char(0) << char(header.size() & 0xff)
     << char((header.size() >> 8) & 0xff) << header;
  os.write(reinterpret_cast<const char *>(array.data.data()),
           array.data.size());
}
