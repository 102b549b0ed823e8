#!/usr/bin/env bash
# Validates ocrt's ALTO and PAGE XML against the published schemas (a development check; the
# schemas are not in the repository). Usage:
#   tools/validate_page_xml.sh BUILD_DIR ALTO_XSD PAGE_XSD [XLINK_XSD]
# ALTO_XSD: alto-4-4.xsd (github.com/altoxml/schema, v4/); PAGE_XSD: pagecontent.xsd 2019-07-15
# (github.com/PRImA-Research-Lab/PAGE-XML, PAGE-release/gts/pagecontent/2019-07-15/). The ALTO
# schema imports the W3C XLink schema from the network; give XLINK_XSD to use a local copy.
# Needs xmllint (Debian: libxml2-utils).
set -euo pipefail
build=$1 alto=$2 page=$3 xlink=${4:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [[ -n "$xlink" ]]; then
  sed "s|schemaLocation=\"http://www.loc.gov/standards/xlink/xlink.xsd\"|schemaLocation=\"$(realpath "$xlink")\"|" "$alto" > "$work/alto.xsd"
  alto="$work/alto.xsd"
fi
mkdir "$work/out"
OCRT_PAGE_XML_DIR="$work/out" "$build/tests/ocrt_tests" "page formats: the documents written for schema validation" > /dev/null
status=0
for f in "$work"/out/alto-*.xml; do xmllint --noout --nonet --schema "$alto" "$f" || status=1; done
for f in "$work"/out/page-*.xml; do xmllint --noout --nonet --schema "$page" "$f" || status=1; done
exit $status
