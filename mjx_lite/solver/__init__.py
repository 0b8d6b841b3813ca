"""Constraint solvers: `solve.solve` (mj_fwdConstraint) with Newton, CG (`primal`) and PGS (`pgs`), sharing the
cost, constraint evaluation and exact line search of `common`.

Layers: `common`, `primal` and `pgs` depend on `mjx_lite.types` only (the pipeline's constraint rows import
`common`); `solve` sits above `pipeline.constraint` and `pipeline.inertia`.
"""
