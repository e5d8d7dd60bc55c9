//===- QueryTiles.h - Query tiles over the union of blocks ----*- C++ -*-===//
//
// The piece the query-tile kernels (the forward's, QueryTileAttention.cpp,
// and the backward's dq pass, QueryGradTiles.cpp) are built on: one block of
// W + 1 warps per W consecutive queries of a batch x KV head, warp w < W
// owning query w's 16 head rows (G <= 16: one m16 tile), warp W copying. The
// block attends the union of its queries' attended blocks in block order (each
// query's list is ascending: the union is a merge), so that a block several of
// them attend is read once:
//
//   listBlocks    each warp lists its query's attended blocks (its lanes
//                 32 entries at a time)
//   mergeLists    thread 0 merges the lists: the union, and per entry the
//                 mask of the warps that attend it
//   produceUnion  warp W (the block has W + 1) copies each union entry's
//                 keys and values by cp.async into one of two buffers once
//                 the query warps have released the buffer's last entry
//                 (mbarriers: a buffer's `full` and `empty`)
//   consumeUnion  each query warp walks the union in order and runs the
//                 kernel's step on the entries its query attends as soon
//                 as they land, carrying its state; no block barrier, the
//                 copies at most two entries ahead of the slowest warp
//
// A warp's steps run in its query's block order whatever the other queries
// attend: its results do not depend on the tile.
//
//===----------------------------------------------------------------------===//

#ifndef PISA_LIB_CONVERSION_PISATOGPU_ATTENTION_QUERYTILES_H
#define PISA_LIB_CONVERSION_PISATOGPU_ATTENTION_QUERYTILES_H

#include "Attention/AttentionSteps.h"
#include "Attention/SparseAttention.h"
#include "Kernels/KernelBuilder.h"

#include "pisa/Conversion/PisaToGPU/PisaToGPU.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"

namespace mlir::pisa::detail {

/// The union's shared memory (byte offsets): two buffers of an entry's K
/// [C x d] and V [C x dv] (16-bit, rows padded by 8 elements for
/// ldmatrix), the warps' lists of attended blocks [W x K] (i32) and their
/// counts, and the union [W K] with its masks and count. A kernel's plan
/// places the buffers and the lists around its own tiles.
struct QueryTileUnionPlan {
  int64_t warps, headDim, valueDim, blockSize, topK;
  int64_t key[2], value[2], lists, counts, unionList, unionMask, unionCount;
  QueryTileUnionPlan(int64_t warps, int64_t headDim, int64_t valueDim,
                     int64_t blockSize, int64_t topK);
  void placeBuffers(int64_t &at);
  void placeLists(int64_t &at);
  /// Each warp's tile of its query's 16 head rows of `width` 16-bit
  /// elements (rows padded by 8 for ldmatrix): the first one's offset and
  /// the bytes of one.
  struct WarpRows {
    int64_t offset, bytesPerWarp, width;
  };
  WarpRows placeWarpRows(int64_t &at, int64_t width) const;
};

/// The coordinates, tiles and union steps a query-tile kernel shares. Its
/// block is (blockIdx.x: W queries, blockIdx.y: batch x KV head).
class QueryTile : protected ThreadPlace {
public:
  QueryTile(ImplicitLocOpBuilder &b, const Kernel &e,
            const QueryTileUnionPlan &plan, int64_t groupSize, int64_t kvHeads);

  /// The warp's own tile of `rows` ([16 x (width + 8)], the element type).
  Value warpTile(ImplicitLocOpBuilder &b,
                 const QueryTileUnionPlan::WarpRows &rows) const;

  /// Head h of the warp's KV head for tile row `row` (rows past G read head
  /// G - 1).
  Value headOf(ImplicitLocOpBuilder &b, Value row) const;

  /// The warp's query's 16 head rows of `source` ([B, H, Nq, width]) into
  /// its tile (rows past G, and every row of a warp past Nq, zeros).
  void stageRows(ImplicitLocOpBuilder &b, Value source, int64_t width,
                 Value tile) const;

  /// One step of a warp on an entry it attends: the entry's first key row,
  /// its K and V tiles, and the warp's state; returns the new state.
  using EntryStep = llvm::function_ref<SmallVector<Value>(
      ImplicitLocOpBuilder &, Value, Value, Value, ValueRange)>;
  /// The tile's walk: the buffers' mbarriers set up; the query warps
  /// list their blocks and run `stage` (their row tiles); thread 0 merges
  /// the lists; then warp W copies the union's entries (produceUnion)
  /// while the query warps run `walk` (consumeUnion, then their results).
  /// Block barriers only before the walk.
  void runTile(ImplicitLocOpBuilder &b,
               llvm::function_ref<void(ImplicitLocOpBuilder &)> stage,
               llvm::function_ref<void(ImplicitLocOpBuilder &)> walk);

  /// A query warp's part of the walk: every union entry in order, `step`
  /// on those its query attends once they land; each entry released
  /// (`empty`) as the warp passes it. Returns the warp's state.
  SmallVector<Value> consumeUnion(ImplicitLocOpBuilder &b, ValueRange init,
                                  EntryStep step);

  /// The keys the warp's query sees of the block from key row `firstKey`:
  /// at least one for an attended block, at most C.
  Value visibleKeys(ImplicitLocOpBuilder &b, Value firstKey) const;

protected:
  const Kernel &e;
  const QueryTileUnionPlan &p;
  int64_t G;
  SharedTiles tiles;
  Type elem;
  Value keyTile[2], valueTile[2], lists, counts, unionList, unionMask,
      unionCount;
  QueryKeys keys;
  /// In a packed batch the lists hold first key rows (blocks of different
  /// sequences differ there), else block indices.
  bool packed;
  Value keyRows, numKeys, query, hasQuery, keyEnd;

private:
  /// Each warp lists the blocks its query attends (ascending, by the
  /// forward's rule, walkAttendedBlocksByWarp) and lane 0 their count.
  void listBlocks(ImplicitLocOpBuilder &b);
  /// Thread 0 merges the warps' lists into the union (ascending, each block
  /// once) with, per entry, the mask of the warps that attend it. The lists
  /// must be visible (a barrier before); the union is, after a barrier.
  void mergeLists(ImplicitLocOpBuilder &b);

  /// The buffers' mbarriers for produceUnion and consumeUnion: thread 0
  /// initializes them (`full`: the producer's 32 lanes, `empty`: the query
  /// warps' 32 W lanes); they are ready after a block barrier.
  void initBufferBarriers(ImplicitLocOpBuilder &b);
  /// Warp W's part (all its lanes): entry u copied into buffer u mod 2 once
  /// the buffer's entry u - 2 is released, `full` arriving when it lands.
  void produceUnion(ImplicitLocOpBuilder &b);

  Value entryFirstRow(ImplicitLocOpBuilder &b, Value entry) const;
  /// Entry `entry` into buffer `entry` mod 2 by the copying warp's lanes:
  /// two copy groups.
  void copyEntry(ImplicitLocOpBuilder &b, Value entry) const;
  /// The step on union entry `u` from its buffer (`parity`: u mod 2).
  SmallVector<Value> stepOnEntry(ImplicitLocOpBuilder &b, Value u, Value parity,
                                 ValueRange acc, EntryStep step);
  /// Waits for phase `phase` mod 2 of mbarrier `id` of bufferBarriers.
  void waitPhase(ImplicitLocOpBuilder &b, Value id, Value phase) const;
  /// This thread's arrival on mbarrier `id` of bufferBarriers.
  void arrive(ImplicitLocOpBuilder &b, Value id) const;
  /// full[s] = s, empty[s] = 2 + s.
  Value bufferBarriers;
};

/// Whether the forward's query-tile kernel takes these sizes: G <= 16 (one
/// m16 tile of head rows), d a multiple of 16 up to 128, dv a multiple of
/// 8 up to 128 (O in a lane's registers: dv / 2 f32), C of 16, 32 or 64,
/// 16-bit inputs.
bool attendsOnQueryTiles(Type elem, int64_t groupSize, int64_t headDim,
                         int64_t valueDim, int64_t blockSize);
/// What attendsOnQueryTiles asks, as a diagnostic says it.
constexpr llvm::StringLiteral kQueryTileAttentionNeeds =
    "the query-tile kernel needs G <= 16, d a multiple of 16 up to 128, dv a "
    "multiple of 8 up to 128, C of 16, 32 or 64 and 16-bit inputs";

/// The forward's query-tile kernel's shared memory: the union's buffers,
/// each warp's Q [16 x d] head rows, the union's lists.
struct QueryTileAttentionPlan {
  QueryTileUnionPlan unionPlan;
  QueryTileUnionPlan::WarpRows query;
  int64_t bytes;
  QueryTileAttentionPlan(int64_t warps, int64_t headDim, int64_t valueDim,
                         int64_t blockSize, int64_t topK);
};

/// The forward's query-tile kernel body (parameters as the register
/// kernel's); the launch has plan.warps queries a block.
void buildQueryTileAttention(ImplicitLocOpBuilder &b, const Kernel &kernel,
                             const QueryTileAttentionPlan &plan,
                             int64_t groupSize, int64_t kvHeads, float scale);

} // namespace mlir::pisa::detail

#endif // PISA_LIB_CONVERSION_PISATOGPU_ATTENTION_QUERYTILES_H
