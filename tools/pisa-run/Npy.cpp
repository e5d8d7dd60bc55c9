//===- Npy.cpp - Minimal .npy reader and writer ---------------------------===//

#include "Npy.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

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

/// Value of 'key' in the header dict, up to the next top-level ',' or '}'
/// (the shape tuple keeps its parentheses).
static std::optional<StringRef> dictValue(StringRef header, StringRef key) {
  size_t at = header.find(("'" + key + "'").str());
  if (at == StringRef::npos)
    return std::nullopt;
  StringRef rest = header.drop_front(at + key.size() + 2).ltrim();
  if (!rest.consume_front(":"))
    return std::nullopt;
  rest = rest.ltrim();
  size_t end = rest.starts_with("(") ? rest.find(')') + 1 : rest.find_first_of(",}");
  if (end == StringRef::npos || end == 0)
    return std::nullopt;
  return rest.take_front(end).trim();
}

llvm::Expected<Array> pisatool::npy::read(StringRef path) {
  auto bufferOr = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                              /*RequiresNullTerminator=*/false);
  if (!bufferOr)
    return createStringError(bufferOr.getError(), "cannot read '%s': %s",
                             path.str().c_str(),
                             bufferOr.getError().message().c_str());
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
  if (headerStart + headerLen > bytes.size())
    return bad("truncated header");
  StringRef header = bytes.substr(headerStart, headerLen);

  Array array;
  std::optional<StringRef> descr = dictValue(header, "descr");
  if (!descr)
    return bad("no 'descr' in the header");
  StringRef d = descr->trim("'\"");
  if (d == "<f4")
    array.dtype = DType::F32;
  else if (d == "<f2")
    array.dtype = DType::F16;
  else if (d == "<i4")
    array.dtype = DType::I32;
  else
    return createStringError(std::errc::invalid_argument,
                             "'%s' has dtype '%s'; expected float32, float16 or "
                             "int32 (little-endian)",
                             path.str().c_str(), d.str().c_str());

  std::optional<StringRef> fortran = dictValue(header, "fortran_order");
  if (!fortran)
    return bad("no 'fortran_order' in the header");
  if (*fortran != "False")
    return createStringError(std::errc::invalid_argument,
                             "'%s' is in Fortran order; expected C order",
                             path.str().c_str());

  std::optional<StringRef> shape = dictValue(header, "shape");
  if (!shape || !shape->starts_with("(") || !shape->ends_with(")"))
    return bad("no 'shape' tuple in the header");
  llvm::SmallVector<StringRef> dims;
  shape->drop_front().drop_back().split(dims, ',', -1, /*KeepEmpty=*/false);
  for (StringRef dim : dims) {
    int64_t extent;
    if (dim.trim().getAsInteger(10, extent) || extent < 0)
      return bad("bad shape " + *shape);
    array.shape.push_back(extent);
  }

  // Overflow-safe size: every extent is checked against the bytes present.
  size_t payload = bytes.size() - headerStart - headerLen;
  uint64_t count = 1;
  for (int64_t extent : array.shape) {
    if (extent != 0 && count > payload / uint64_t(extent))
      return bad("shape " + *shape + " needs more data than the file holds");
    count *= uint64_t(extent);
  }
  if (count * dtypeSize(array.dtype) != payload)
    return bad("shape " + *shape + " needs " +
               llvm::Twine(count * dtypeSize(array.dtype)) +
               " bytes of data but the file holds " + llvm::Twine(payload));
  const char *data = bytes.data() + headerStart + headerLen;
  array.data.assign(data, data + payload);
  return array;
}

llvm::Error pisatool::npy::write(StringRef path, const Array &array) {
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

  std::string tmp = (path + ".tmp").str();
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(tmp, ec, llvm::sys::fs::OF_None);
    if (ec)
      return createStringError(ec, "cannot write '%s': %s", path.str().c_str(),
                               ec.message().c_str());
    os.write(kMagic, 6);
    os << char(1) << char(0) << char(header.size() & 0xff)
       << char((header.size() >> 8) & 0xff) << header;
    os.write(reinterpret_cast<const char *>(array.data.data()),
             array.data.size());
    os.close();
    if (os.has_error()) {
      os.clear_error();
      llvm::sys::fs::remove(tmp);
      return createStringError(std::errc::io_error, "cannot write '%s'",
                               path.str().c_str());
    }
  }
  if (std::error_code ec = llvm::sys::fs::rename(tmp, path)) {
    llvm::sys::fs::remove(tmp);
    return createStringError(ec, "cannot write '%s': %s", path.str().c_str(),
                             ec.message().c_str());
  }
  return llvm::Error::success();
}
