#!/usr/bin/env python3
"""cputime.py OUT CMD...: runs CMD (its output passes through) and writes the user and system CPU
seconds it and its threads used to OUT, as "user sys"; exits with CMD's status."""
import resource
import subprocess
import sys

status = subprocess.call(sys.argv[2:])
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(sys.argv[1], "w") as out:
    out.write(f"{usage.ru_utime} {usage.ru_stime}\n")
sys.exit(status)
