//===- PyramidLayout.h - Level sizes and offsets of a key pyramid -*- C++
//-*-===//
//
// The shape of the pyramid that pisa.pyramid_build packs into one tensor:
// how many nodes each level has and where it starts. Shared by the
// verifiers, every lowering and the tools so that they cannot disagree.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_ANALYSIS_PYRAMIDLAYOUT_H
#define PISA_ANALYSIS_PYRAMIDLAYOUT_H

#include <cstdint>
#include <vector>

namespace mlir::pisa {

/// Levels are numbered from 1 (the leaves, ceil(N / C) blocks) up to
/// numLevels() (the root, one node). Level l starts at row offset(l) of the
/// packed pyramid; leaves come first.
class PyramidLayout {
public:
  /// Requires numKeys >= 1, blockSize >= 1, branching >= 2.
  PyramidLayout(int64_t numKeys, int64_t blockSize, int64_t branching);

  int64_t numKeys() const { return keys; }
  int64_t blockSize() const { return block; }
  int64_t branching() const { return fan; }
  int64_t numLevels() const { return static_cast<int64_t>(sizes.size()); }
  int64_t numLeaves() const { return sizes.front(); }
  /// Nodes on level `level` (1-based).
  int64_t size(int64_t level) const { return sizes[level - 1]; }
  /// First row of level `level` in the packed pyramid.
  int64_t offset(int64_t level) const { return offsets[level - 1]; }
  /// Rows of the packed pyramid: the sum of all level sizes.
  int64_t totalNodes() const { return total; }
  /// Leaves covered by one node of `level`: g^(level-1).
  int64_t leavesPerNode(int64_t level) const { return spans[level - 1]; }

private:
  int64_t keys, block, fan, total = 0;
  std::vector<int64_t> sizes, offsets, spans;
};

/// Upper bounds on the contract's parameters, checked by the verifiers and
/// the tools: a query keeps g * K candidates per level, so both bound its
/// work and memory (K above the number of leaves is legal and pads).
constexpr int64_t kMaxTopK = 4096;
constexpr int64_t kMaxBranching = 64;
/// Queries a two-stage tile groups (q_tile): a tile's q_tile x G head rows
/// are one GPU block's threads (at most 1024), and the bound keeps the
/// scorer's tile arithmetic far from int64 overflow.
constexpr int64_t kMaxQueryTile = 1024;
/// Keys per leaf block; keeps every node's key span (C * g^(l-1) < C * g *
/// M_1) far from int64 overflow for any tensor size.
constexpr int64_t kMaxBlockSize = int64_t(1) << 20;

/// The varlen pyramid layout (docs/semantics.md, section 7): sequence b's
/// pyramid at rows 2 floor(cu_k[b] / C) + 32 b, since P(N) <= 2 ceil(N / C)
/// + L - 2 and L <= 32 for N < 2^31 (i32 cu_seqlens).
constexpr int64_t kVarlenRowsPerSequence = 32;
/// The selection entry of every row of a packed sequence whose cu_seqlens
/// break a rule, where the rule can only be checked on the device (GPU
/// kernels: docs/semantics.md, section 7). Not a leaf and not padding.
constexpr int32_t kInvalidInput = -2;
/// R = 2 floor(Tk / C) + 32 B rows for Tk packed keys of B sequences.
int64_t varlenPyramidRows(int64_t numKeys, int64_t numSequences,
                          int64_t blockSize);

/// The children of a node of level `level` >= 1 (docs/semantics.md,
/// section 2): node n owns children n * fanout .. n * fanout + fanout - 1
/// one level down, and child r starts at key r * keysPerChild. At level 1
/// the children are the block's C keys; above, g summaries each covering
/// C g^(level - 2) keys. Requires a level whose span fits int64 (the
/// verifiers bound it to 2^31 - 1 keys).
struct ScoredLevel {
  int64_t fanout, keysPerChild;
};
inline ScoredLevel scoredLevel(int64_t level, int64_t blockSize,
                               int64_t branching) {
  if (level <= 1)
    return {blockSize, 1};
  int64_t span = blockSize;
  for (int64_t l = 2; l < level; ++l)
    span *= branching;
  return {branching, span};
}

/// ceil(a / b) for a >= 0, b > 0.
/// No overflow for any such a (a + b - 1 would for a near INT64_MAX).
inline int64_t ceilDiv(int64_t a, int64_t b) { return a / b + (a % b != 0); }

} // namespace mlir::pisa

#endif // PISA_ANALYSIS_PYRAMIDLAYOUT_H
