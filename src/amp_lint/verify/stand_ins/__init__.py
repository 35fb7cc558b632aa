"""Stand-ins for third-party libraries that the runtime cases call (AMP005's SSIM and LPIPS).

Each module here is imported under the real library's name while the cases load (see
cases.stand_ins_importable), so a case reads exactly like user code and amp-lint recognises
the call, while the suite needs nothing but torch. Each one reproduces the arithmetic of the
library it stands for, written from the published formulas, not copied: what matters for
mixed precision is which ops run and on which values.
"""
