#!/bin/bash
# Render report.html in headless Chromium: the screenshot must not be blank and the DOM must
# hold the statistics table. Exit 77 (skip) when chromium is not installed.
# usage: check_chromium.sh REPORT_DIR PYTHON
set -u
dir=$1
py=${2:-/usr/bin/python3}
chrome=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$chrome" ]; then
  echo "skip: chromium not installed"
  exit 77
fi
prof=$(mktemp -d)
trap 'rm -rf "$prof"' EXIT
flags=(--headless --no-sandbox --disable-gpu --disable-background-networking
       --disable-component-update --disable-sync --no-first-run --user-data-dir="$prof")
timeout 120 "$chrome" "${flags[@]}" --screenshot="$dir/screenshot.png" --window-size=1280,2000 \
  "file://$dir/report.html" >/dev/null 2>&1
timeout 120 "$chrome" "${flags[@]}" --dump-dom "file://$dir/report.html" > "$dir/dom.html" 2>/dev/null
grep -q 'id="stats"' "$dir/dom.html" || { echo "FAIL: DOM lacks the stats table"; exit 1; }
grep -q '<svg' "$dir/dom.html" || { echo "FAIL: DOM lacks the SVG charts"; exit 1; }
"$py" - "$dir/screenshot.png" <<'PY'
import sys, cv2
img = cv2.imread(sys.argv[1])
if img is None:
    print("FAIL: no screenshot"); sys.exit(1)
# non-blank: many distinct colours (text, bars, strips), not one flat page
uniq = len({tuple(p) for p in img[::4, ::4].reshape(-1, 3)})
dark = (img.mean(axis=2) < 128).mean()
print(f"screenshot {img.shape[1]}x{img.shape[0]}: {uniq} colours, {dark:.3%} dark pixels")
if uniq < 20 or dark < 0.002:
    print("FAIL: screenshot looks blank"); sys.exit(1)
PY
rc=$?
[ $rc -eq 0 ] && echo "ok: chromium rendered the report"
exit $rc
