"""What the chart's check scripts (check_dashboard.py, check_rendered.py)
share: a failed expectation (Fail, expect) and how a check ends (run: a
Fail is printed to stderr as "PREFIX: message", exit 1). Imported from the
scripts' own directory; not run."""
import sys


class Fail(Exception):
    pass


def expect(cond, msg):
    if not cond:
        raise Fail(msg)


def run(main, prefix="FAIL"):
    try:
        main()
    except Fail as e:
        print(f"{prefix}: {e}", file=sys.stderr)
        sys.exit(1)
