"""What the test modules share, one module per concept.

Test modules import their helpers from here, never from each other, and nothing
here imports bench (bench and tests may import the product, never each other).
"""
