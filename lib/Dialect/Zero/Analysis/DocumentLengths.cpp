//===- DocumentLengths.cpp - Packed rows' document lengths ----------------===//
//
// Part of the zero-mlir project.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/Analysis/DocumentLengths.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace mlir;
using namespace mlir::zero;

namespace {

/// The query-key pairs a mask keeps in a document of `length` tokens, in
/// the continuous form the attention kernels' FLOP counts use (causal:
/// half the square; a window `w` keeps `w` keys a query past its first
/// `w`).
double pairs(int64_t length, bool causal, int64_t window) {
  double l = double(length);
  if (window > 0 && window < length) {
    double w = double(window);
    return w * (l - w) + w * w / 2;
  }
  return causal ? l * l / 2 : l * l;
}

} // namespace

double DocumentLengths::getAttentionFraction(int64_t seq, bool causal,
                                             int64_t window) const {
  double sum = 0;
  for (auto [length, count] : lengths)
    sum += double(count) * pairs(length, causal, window);
  return sum / double(rows) / pairs(seq, causal, window);
}

double DocumentLengths::getFill() const {
  return double(tokens) / (double(rows) * double(seq));
}

double DocumentLengths::getPaddedFill() const {
  return double(tokens) / (double(documents) * double(seq));
}

llvm::Expected<DocumentLengths>
mlir::zero::readDocumentLengths(StringRef path) {
  auto fail = [&](const Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   path + ": " + message);
  };
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!file)
    return fail("cannot read it: " + file.getError().message());
  llvm::Expected<llvm::json::Value> json =
      llvm::json::parse((*file)->getBuffer());
  if (!json)
    return fail("not JSON: " + llvm::toString(json.takeError()));
  const llvm::json::Object *object = json->getAsObject();
  if (!object)
    return fail("expected an object with seq, rows, documents, tokens and "
                "lengths (zero-data --pack --doc-lengths)");
  DocumentLengths d;
  for (auto [key, field] : {std::pair<StringRef, int64_t *>{"seq", &d.seq},
                            {"rows", &d.rows},
                            {"documents", &d.documents},
                            {"tokens", &d.tokens}}) {
    std::optional<int64_t> v = object->getInteger(key);
    if (!v || *v < 1)
      return fail("'" + key + "' must be a positive integer");
    *field = *v;
  }
  const llvm::json::Array *lengths = object->getArray("lengths");
  if (!lengths)
    return fail("'lengths' must be a list of [length, count] pairs");
  int64_t documents = 0, tokens = 0;
  for (auto [i, entry] : llvm::enumerate(*lengths)) {
    const llvm::json::Array *pair = entry.getAsArray();
    std::optional<int64_t> length, count;
    if (pair && pair->size() == 2) {
      length = (*pair)[0].getAsInteger();
      count = (*pair)[1].getAsInteger();
    }
    if (!length || !count || *length < 1 || *length > d.seq || *count < 1)
      return fail("lengths[" + Twine(i) +
                  "] must be [length, count] with 1 <= length <= seq (" +
                  Twine(d.seq) + ") and count >= 1");
    d.lengths.push_back({*length, *count});
    documents += *count;
    tokens += *length * *count;
  }
  if (documents != d.documents || tokens != d.tokens)
    return fail("'lengths' hold " + Twine(documents) + " documents of " +
                Twine(tokens) + " tokens, but 'documents' says " +
                Twine(d.documents) + " and 'tokens' " + Twine(d.tokens));
  if (d.tokens > d.rows * d.seq)
    return fail(Twine(d.tokens) + " tokens do not fit " + Twine(d.rows) +
                " rows of " + Twine(d.seq) + " tokens");
  return d;
}
