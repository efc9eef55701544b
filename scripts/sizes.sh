#!/usr/bin/env bash
# Lists what breaks the size rules of the C sources (a file does one job in
# at most ~700 lines; a function reads at once, in at most ~80): every file
# over FILE_MAX lines and every function over FUNC_MAX lines (from its
# signature to its closing brace), longest first; with -a also the TOP
# longest functions and the longest files, whatever their length.
#
# Usage: scripts/sizes.sh [-a] [DIR...]   (default: common server client wrapper ctl)
# Exits 1 when anything is over, 0 otherwise. Functions are found the way
# .clang-format lays them out: a signature starting in column 0 and the
# body's braces alone in column 0.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
FILE_MAX=${FILE_MAX:-700}
FUNC_MAX=${FUNC_MAX:-80}
TOP=${TOP:-10}
all=0
if [ "${1:-}" = -a ]; then
  all=1
  shift
fi
[ $# -gt 0 ] || set -- common server client wrapper ctl
mapfile -t files < <(find "$@" -type f \( -name '*.c' -o -name '*.h' \) | LC_ALL=C sort)

over=0
while read -r n f; do
  [ "$f" = total ] && continue
  if [ "$n" -gt "$FILE_MAX" ]; then
    echo "file over $FILE_MAX lines: $f ($n)"
    over=1
  fi
done < <(wc -l "${files[@]}")

funcs=$(LC_ALL=C awk '
FNR == 1 { sig = 0 }
/^[A-Za-z_].*\(/ && !/;[ \t]*$/ { sig = FNR; name = $0 }
/^\{/ && sig { start = sig }
/^\}/ && start {
    n = split(name, w, "(")
    fn = w[1]
    sub(/.*[ *]/, "", fn)
    printf "%d %s:%d %s\n", FNR - start + 1, FILENAME, start, fn
    start = 0; sig = 0
}' "${files[@]}" | sort -rn)

while read -r n where fn; do
  [ -n "$n" ] || continue
  if [ "$n" -gt "$FUNC_MAX" ]; then
    echo "function over $FUNC_MAX lines: $fn at $where ($n)"
    over=1
  fi
done <<<"$funcs"

if [ "$all" = 1 ]; then
  echo "the $TOP longest functions:"
  head -n "$TOP" <<<"$funcs" | while read -r n where fn; do
    printf '  %4d  %s  %s\n' "$n" "$fn" "$where"
  done
  echo "the longest files:"
  wc -l "${files[@]}" | grep -v ' total$' | sort -rn | head -n 5 | sed 's/^/  /'
fi
exit "$over"
