# Sourced by the shell tests (cli_test.sh, parallel_test.sh), which keep `passes` and `fails`.
# verdict NAME STATUS OUTPUT: counts a check the caller evaluated (STATUS 0: passed; else OUTPUT's tail)
verdict() {
  if [ "$2" -eq 0 ]; then
    echo "ok   $1"
    passes=$((passes + 1))
  else
    echo "FAIL $1:"
    echo "$3" | tail -15
    fails=$((fails + 1))
  fi
}
