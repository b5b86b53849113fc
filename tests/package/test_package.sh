#!/usr/bin/env bash
# The Debian package end to end: cpack builds it from the build folder, dpkg-deb unpacks it into a
# temporary root, and the unpacked program runs from another folder with the source tree's
# fallbacks off (ATTNSCOPE_NO_SOURCE_TREE=1), so a file missing from the package fails here
# instead of being found in the checkout. Then the desktop entry, metainfo, MIME type, man page,
# icons and bash completion are checked.
# Usage: test_package.sh BUILD_DIR
set -euo pipefail
build=$(realpath "$1")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
step() { echo "-- $*"; }

# 1. Build the package (into the temporary folder: the build folder's own package is untouched).
step "cpack -G DEB"
(cd "$build" && cpack -G DEB -B "$tmp/pkg" >"$tmp/cpack.log" 2>&1) || {
  cat "$tmp/cpack.log"
  fail "cpack failed"
}
debs=("$tmp"/pkg/attnscope_*.deb)
[ -f "${debs[0]}" ] || fail "cpack made no attnscope_*.deb"
deb=${debs[0]}
step "$(basename "$deb"): $(du -h "$deb" | cut -f1)"
[ "$(dpkg-deb -f "$deb" Package)" = attnscope ] || fail "package name"
[ "$(dpkg-deb -f "$deb" Version)" = 0.1.0 ] || fail "version: $(dpkg-deb -f "$deb" Version)"
depends=$(dpkg-deb -f "$deb" Depends)
for lib in libqt6gui6 libvulkan1 libc6 fonts-dejavu-core; do
  [[ $depends == *"$lib"* ]] || fail "Depends lacks $lib (shlibdeps): $depends"
done

# 2. Unpack and check the layout.
root=$tmp/root
dpkg-deb -x "$deb" "$root"
share=$root/usr/share
id=org.attnscope.attnscope
for f in usr/bin/attnscope \
  usr/share/attnscope/models/default-text/config.json \
  usr/share/attnscope/models/default-text/model.safetensors \
  usr/share/attnscope/models/default-vision/config.json \
  usr/share/attnscope/samples/lighthouse.txt \
  usr/share/attnscope/images/sneaker_1.png \
  usr/share/attnscope/lessons/1-one-head.attnscope-lesson.json \
  usr/share/attnscope/lessons/6-attention-and-attribution.attnscope-lesson.json \
  usr/share/doc/attnscope/README.md \
  usr/share/doc/attnscope/changelog.gz \
  usr/share/doc/attnscope/docs/sessions/text.attnscope.json \
  usr/share/applications/$id.desktop \
  usr/share/metainfo/$id.metainfo.xml \
  usr/share/mime/packages/attnscope.xml \
  usr/share/icons/hicolor/scalable/apps/$id.svg \
  usr/share/icons/hicolor/48x48/apps/$id.png \
  usr/share/icons/hicolor/128x128/apps/$id.png \
  usr/share/icons/hicolor/256x256/apps/$id.png \
  usr/share/man/man1/attnscope.1.gz \
  usr/share/bash-completion/completions/attnscope; do
  [ -s "$root/$f" ] || fail "missing from the package: /$f"
done
[ -x "$root/usr/bin/attnscope" ] || fail "/usr/bin/attnscope is not executable"
if find "$root" -path '*/golden/*' | grep -q .; then fail "test goldens are packaged"; fi

# 3. Run the unpacked program from an unrelated folder, source tree fallbacks off.
exe=$root/usr/bin/attnscope
work=$tmp/work
mkdir "$work"
cd "$work"
export ATTNSCOPE_NO_SOURCE_TREE=1 QT_QPA_PLATFORM=offscreen
unset ATTNSCOPE_MODELS

# The switch works: the build folder's program, without the source tree, finds no model.
if "$build/app/attnscope" analyze --model default-text --text "x" --no-end-to-end \
  >"$tmp/nosrc.log" 2>&1; then
  fail "ATTNSCOPE_NO_SOURCE_TREE=1 did not hide the source tree's models"
fi
grep -q "not found" "$tmp/nosrc.log" || { cat "$tmp/nosrc.log"; fail "unexpected error"; }

run() {  # run NAME ARGS...: the unpacked attnscope; prints its output on failure
  local name=$1
  shift
  step "attnscope $*"
  "$exe" "$@" >"$tmp/$name.log" 2>&1 || {
    cat "$tmp/$name.log"
    fail "attnscope $* exited with $?"
  }
}
run version --version
grep -q "^attnscope 0.1.0$" "$tmp/version.log" || fail "--version: $(cat "$tmp/version.log")"

run analyze analyze --model default-text --text "The keeper of the lighthouse wrote every evening." \
  -v "window(size=8)" --json analyze.json
[ -s analyze.json ] || fail "analyze wrote no analyze.json"

run vision analyze --model default-vision --image "$share/attnscope/images/sneaker_1.png" \
  -v "window(size=8)" --no-end-to-end --json vision.json
[ -s vision.json ] || fail "analyze (vision) wrote no vision.json"

cp "$share/doc/attnscope/docs/sessions/text.attnscope.json" session.attnscope.json
run render render --session session.attnscope.json --view heatmap --out heatmap.png --width 600
[ "$(head -c 8 heatmap.png | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] ||
  fail "render wrote no PNG"
[ -s heatmap.png.attnscope.json ] || fail "render wrote no sidecar"

# 4. Desktop integration files.
desktop=$share/applications/$id.desktop
grep -q '^Exec=attnscope %f$' "$desktop" || fail "the desktop entry must pass the file to attnscope"
grep -q '^MimeType=application/x-attnscope-session;$' "$desktop" || fail "desktop MimeType"
grep -q "^Icon=$id$" "$desktop" || fail "desktop Icon"
if command -v desktop-file-validate >/dev/null; then
  step "desktop-file-validate"
  desktop-file-validate "$desktop" || fail "desktop-file-validate"
else
  step "desktop-file-validate not installed: skipped"
fi
if command -v appstreamcli >/dev/null; then
  step "appstreamcli validate --no-net"
  appstreamcli validate --no-net --pedantic "$share/metainfo/$id.metainfo.xml" ||
    fail "appstreamcli validate"
else
  step "appstreamcli not installed: skipped"
fi
grep -q 'pattern="\*.attnscope.json"' "$share/mime/packages/attnscope.xml" || fail "MIME glob"
if command -v xmllint >/dev/null; then
  xmllint --noout "$share/mime/packages/attnscope.xml" "$share/metainfo/$id.metainfo.xml"
fi
if command -v update-mime-database >/dev/null; then
  # Build the MIME cache of the unpacked tree as the system would: the type must come out.
  step "update-mime-database"
  cp -r "$share/mime" "$tmp/mime"
  update-mime-database "$tmp/mime" >/dev/null 2>&1 || fail "update-mime-database"
  [ -f "$tmp/mime/application/x-attnscope-session.xml" ] || fail "MIME type not registered"
fi
for size in 48 128 256; do
  png=$share/icons/hicolor/${size}x${size}/apps/$id.png
  [ "$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "$png not PNG"
  # PNG width and height: big-endian at bytes 16 and 20.
  w=$(od -An -tu1 -j16 -N4 "$png" | awk '{print $1*16777216 + $2*65536 + $3*256 + $4}')
  [ "$w" = "$size" ] || fail "$png is $w pixels wide, not $size"
done

# 5. The man page (help2man), with a section per verb.
step "man page"
gzip -t "$share/man/man1/attnscope.1.gz"
man=$(gzip -dc "$share/man/man1/attnscope.1.gz")
[[ $man == *'.TH ATTNSCOPE "1"'* ]] || fail "man page header"
for v in variants run demo analyze render sweep gui; do
  [[ $man == *"attnscope $v"* ]] || fail "the man page does not describe '$v'"
done
[[ $man != *"$build"* ]] || fail "the man page shows the build folder"

# 6. Bash completion: every verb, and every option each verb's --help lists.
step "bash completion"
completion=$share/bash-completion/completions/attnscope
bash -n "$completion"
verbs=$("$exe" --help | awk '/^Subcommands:/ {on = 1; next} on && NF == 0 {on = 0} on {print $1}')
[ -n "$verbs" ] || fail "no verbs in attnscope --help"
for v in $verbs; do
  grep -q "^    $v)" "$completion" || fail "bash completion lacks the verb '$v'"
  listed=" $(sed -n "/^    $v)/,/;;/p" "$completion" | grep -oE -- '--[a-z][a-z-]*' | xargs) "
  for o in $("$exe" "$v" --help | grep -oE '^ +(-[a-z],)?--[a-z][a-z-]*' | grep -oE -- '--[a-z-]+'); do
    [[ $listed == *" $o "* ]] || fail "bash completion of '$v' lacks $o"
  done
done
if [ -f /usr/share/bash-completion/bash_completion ]; then
  got=$(bash -c 'source /usr/share/bash-completion/bash_completion; source "$1"
    COMP_WORDS=(attnscope render --view ""); COMP_CWORD=3; COMP_LINE="attnscope render --view "
    COMP_POINT=${#COMP_LINE}; _attnscope attnscope "" --view; echo "${COMPREPLY[*]}"' _ "$completion")
  [[ $got == *heatmap* ]] || fail "completing 'render --view' gave '$got'"
fi

step "ok"
