# The batch build of an IndexFile (index_build.pyx): no C declarations are shared yet; its
# Python API is in index_build.pyi.
