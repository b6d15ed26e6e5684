"""`python3 -m exasim_plot plot|report ARGS`."""
import sys

from .cli import main

sys.exit(main(sys.argv[1:]))
