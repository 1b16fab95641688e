# Sourced by the shell suites.
# expect NAME EXPECTED_STATUS PATTERN -- COMMAND...: status and output (stdout+stderr) must match;
# prints PASS, or FAIL with the output's last lines.
expect() {
  local name=$1 want=$2 pattern=$3; shift 4
  local out status
  out=$("$@" 2>&1); status=$?
  if [[ $status -eq $want ]] && grep -qE -- "$pattern" <<<"$out"; then
    echo "PASS $name"
  else
    echo "FAIL $name (exit $status, wanted $want; output must match /$pattern/)"
    echo "$out" | tail -n 8 | sed 's/^/    /'
  fi
}
