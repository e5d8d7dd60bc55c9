//===- PisaToLinalg.h - pisa to linalg/scf patterns -------------*- C++ -*-===//

#ifndef PISA_CONVERSION_PISATOLINALG_PISATOLINALG_H
#define PISA_CONVERSION_PISATOLINALG_PISATOLINALG_H

namespace mlir {
class RewritePatternSet;

namespace pisa {

/// pisa.pyramid_build to pad + linalg.reduce + mean per level.
void populatePyramidBuildToLinalgPatterns(RewritePatternSet &patterns);

/// pisa.lse_score and pisa.hier_topk to bounded scf loops.
void populateSelectionToLoopsPatterns(RewritePatternSet &patterns);

/// pisa.sparse_attention to scf loops with an online softmax.
void populateAttentionToLoopsPatterns(RewritePatternSet &patterns);

/// pisa.sparse_attention_grad to scf loops over the attended keys.
void populateAttentionGradToLoopsPatterns(RewritePatternSet &patterns);

/// The varlen ops (section 7) as a loop over the sequences of the batched
/// ops, and token-major batched ops as head-major ones between transposes;
/// the patterns above then lower what these create.
void populateVarlenToLoopsPatterns(RewritePatternSet &patterns);

/// pisa.decode_select as a loop over the sequences of the capacity form of
/// pisa.hier_topk (lowered by the patterns above).
void populateDecodeToLoopsPatterns(RewritePatternSet &patterns);

/// Everything --convert-pisa-to-linalg applies.
void populatePisaToLinalgConversionPatterns(RewritePatternSet &patterns);

} // namespace pisa
} // namespace mlir

#endif // PISA_CONVERSION_PISATOLINALG_PISATOLINALG_H
