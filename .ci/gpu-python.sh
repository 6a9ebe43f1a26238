# Sourced by the .ci/gpu-* scripts, in the checkout's root: the lent GPU's Python (docs/DEVELOPING.md, "Python on the
# lent GPU"; the device image's numpy breaks numba, and .ci/gpu-wheels prepares the wheels that fix it).
#   wheels in .whl: installed into /tmp/site (GPU_PYTHON_SITE), which goes first on PYTHONPATH (then the checkout) and
#                   PATH; a failed install ends the script
#   none there:     the Python found is used as it is (a caller that installed them and moved .whl away, as
#                   .ci/gpu-parts.sh does, keeps its /tmp/site first), with the checkout on PYTHONPATH
if ls .whl/*.whl > /dev/null 2>&1; then
  site=${GPU_PYTHON_SITE:-/tmp/site}
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" .whl/*.whl \
    || { echo "$0: pip could not install the wheels in .whl" >&2; exit 1; }
  export PYTHONPATH=$site:$PWD PATH=$site/bin:$PATH
else
  export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD
fi
