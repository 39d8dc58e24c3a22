"""Type stub of rocketstore/_native/columnar_decode.pyx: the columnar decode's pass over the
records (native only; rocketstore._native.columnar is its Python API)."""
