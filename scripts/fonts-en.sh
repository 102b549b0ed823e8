#!/usr/bin/env bash
# Gathers what the English models train and validate on into one folder, from Debian's
# packages (scripts/install-deps.sh --train installs them):
#   DEST/train/   the fonts of train/fonts/en-train.txt
#   DEST/val/     the fonts of train/fonts/en-val.txt (other designs; they never train)
#   DEST/prose.txt  English prose: Debian's fortunes files (the fortunes and fortunes-min
#                 packages), minus the pictures (art, ascii-art); never /usr/share/common-licenses/,
#                 which is kept for evaluation
#   DEST/words    /usr/share/dict/words (wamerican)
#   scripts/fonts-en.sh DEST
set -euo pipefail
cd "$(dirname "$0")/.."
dest="${1:?usage: scripts/fonts-en.sh DEST}"
rm -rf "$dest" && mkdir -p "$dest/train" "$dest/val"
copy_list() {  # list file, folder
  local n=0
  while IFS= read -r f; do
    case "$f" in ''|'#'*) continue ;; /*) p="$f" ;; *) p="/usr/share/fonts/$f" ;; esac
    [ -f "$p" ] || { echo "fonts-en: missing $p (scripts/install-deps.sh --train installs it)" >&2; exit 1; }
    cp -L "$p" "$2/$(basename "$p" | tr ' ' '_')"
    n=$((n + 1))
  done < "$1"
  echo "$n"
}
ntrain=$(copy_list train/fonts/en-train.txt "$dest/train")
nval=$(copy_list train/fonts/en-val.txt "$dest/val")
fortunes=/usr/share/games/fortunes
[ -d "$fortunes" ] || { echo "fonts-en: $fortunes missing (install fortunes, fortunes-min)" >&2; exit 1; }
: > "$dest/prose.txt"
for f in "$fortunes"/*; do
  case "$(basename "$f")" in *.dat|*.u8|art|ascii-art) continue ;; esac
  [ -f "$f" ] && iconv -f UTF-8 -t UTF-8 -c "$f" >> "$dest/prose.txt"
done
cp -L /usr/share/dict/words "$dest/words"
echo "fonts-en: $ntrain training fonts, $nval validation fonts, $(wc -w < "$dest/prose.txt") words of prose in $dest ($(du -sh "$dest" | cut -f1))"
