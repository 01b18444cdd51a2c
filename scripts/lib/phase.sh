# phase NAME COMMAND...: runs COMMAND, then prints its wall time. Sourced by the scripts.
# With CALRT_PHASE_LOG set (.ci/run sets it), each phase also appends "NAME<TAB>SECONDS<TAB>
# STATUS" there, so the run ends with one table of where its time went. Returns COMMAND's
# status.
phase() {
  local name=$1
  shift
  local start=$SECONDS status=0
  echo "== $name"
  "$@" || status=$?
  local seconds=$((SECONDS - start))
  local verdict=ok
  ((status == 0)) || verdict="FAILED (exit $status)"
  printf '== %s: %d s, %s\n' "$name" "$seconds" "$verdict"
  if [[ -n "${CALRT_PHASE_LOG:-}" ]]; then
    printf '%s\t%d\t%s\n' "$name" "$seconds" "$verdict" >>"$CALRT_PHASE_LOG"
  fi
  return "$status"
}
