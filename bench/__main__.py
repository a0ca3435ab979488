import sys
import time

from bench import common, run

t0 = time.monotonic()
rc = run.main()
common.log(f"done in {time.monotonic() - t0:.0f} s")
sys.exit(rc)
