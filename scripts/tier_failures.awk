# What failed in one tier's log, for the summary at the end of scripts/test.sh: pytest's short
# summary lines, and for each failed Ansible task its name, its assertion and its "msg" (molecule
# wraps the task's JSON over many "│ "-prefixed lines; a failure that Ansible then ignores is left
# out).
function flush(    found) {
  if (!in_block) return
  in_block = 0
  if (ignored) return
  print "failed task: " task
  if (match(block, /"assertion": "([^"\\]|\\.)*"/)) print "  " substr(block, RSTART, RLENGTH)
  if (match(block, /"msg": "([^"\\]|\\.)*"/)) print "  " substr(block, RSTART, RLENGTH)
  else print "  " substr(block, 1, 300)
}
{
  gsub(/\033\[[0-9;]*m/, "")
  line = $0
  sub(/^[ \t]*│ ?/, "", line)
  sub(/^[ \t]+/, "", line)
}
in_block && /\.\.\.ignoring/ { ignored = 1 }
in_block && (/TASK \[|PLAY \[|PLAY RECAP|\.\.\.ignoring/ || line == "") { flush() }
in_block { block = block " " line; next }
/TASK \[/ { task = line; sub(/^TASK /, "", task) }
/^(FAILED|ERROR) / || /scenario .* FAILED/ { print line; next }
/fatal: \[/ { block = line; in_block = 1; ignored = 0 }
END { flush() }
