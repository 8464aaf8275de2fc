"""`harness data`: datasets fetched once on the host into a folder that jobs read, never write.

Standard library only (plus rich for progress bars, and Pillow for `import`): the host stays
free of NumPy and the frameworks. Arrays are written as a NumPy-compatible .npz, built
byte by byte (see npz.py), so jobs load them with a plain `numpy.load`.
"""
