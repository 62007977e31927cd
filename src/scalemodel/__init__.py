"""scalemodel: executable napkin math for ML infrastructure and GPUs.

Every result carries the derivation that produced it (see :mod:`scalemodel.derive`), and every
constant it uses comes from the bundled spec data with its source (see :mod:`scalemodel.specs`).
"""

__version__ = "0.1.0"
