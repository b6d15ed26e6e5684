"""matplotlib on the Agg backend; exits 3 under the exasim binary's probe when it is missing."""
import os
import sys

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.lines
    from matplotlib.patches import Patch, Rectangle
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator
except ImportError:
    if os.environ.get("EXASIM_PYTHON_PROBE"):
        sys.exit(3)  # the exasim binary tries its next python3 and then says what is missing
    sys.stderr.write("exasim plot: needs matplotlib (Debian: python3-matplotlib; tools/setup installs it)\n")
    sys.exit(1)
