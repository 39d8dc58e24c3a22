"""Type stub of rocketstore/_native/index_check.pyx: the integrity check of an IndexFile (its
functions are shared with IndexFile.check through index_check.pxd; no Python API)."""
