# Reads the result table `dcgmi diag` prints and writes one line per failure, tab-separated:
# the test, the GPU index (empty when the failure names none) and its message (the test's
# Warning and Error rows, which dcgmi wraps every 45 characters over rows with an empty name).
BEGIN { FS = "|"; reset() }

function reset() { test = ""; failed = 0; gpus = ""; nmsg = 0; kind = "" }
function rtrim(s) { sub(/ +$/, "", s); return s }
function gpulist(result) { sub(/^Fail( - GPUs?:)? */, "", result); return result }
function messages_for(gpu,    k, m) {
  m = ""
  for (k = 1; k <= nmsg; k++)
    if (gpu == "" || index(msgs[k], "GPU " gpu " ") == 1) m = m (m == "" ? "" : "; ") msgs[k]
  return m
}
function flush(    n, i, k, g, m) {
  if (test != "" && failed) {
    n = split(gpus, list, /, */)
    if (n > 0) {
      for (i = 1; i <= n; i++) {
        m = messages_for(list[i])
        if (m == "") m = messages_for("")
        print test "\t" list[i] "\t" (m == "" ? "failed" : m)
      }
    } else if (nmsg == 0) {
      print test "\t\tfailed"
    } else {
      for (k = 1; k <= nmsg; k++) {
        g = ""
        if (match(msgs[k], /^GPU [0-9]+ /)) g = substr(msgs[k], 5, RLENGTH - 5)
        print test "\t" g "\t" msgs[k]
      }
    }
  }
  reset()
}

/^\+/ { flush(); next }
/^\|/ && NF >= 4 {
  name = $2; sub(/^ +/, "", name); name = rtrim(name)
  chunk = substr($3, 2); text = rtrim(chunk)
  if (name == "Warning" || name == "Error") {
    kind = name; nmsg++; msgs[nmsg] = text; last = text
    next
  }
  if (name == "Info") { kind = name; next }
  if (name == "") {
    if (kind == "Warning" || kind == "Error") {
      # A chunk cut short of 45 characters ended in blanks the padding swallowed.
      if (length(last) < 45 && substr(chunk, 1, 1) != " ") msgs[nmsg] = msgs[nmsg] " "
      msgs[nmsg] = msgs[nmsg] text; last = text
    } else if (text ~ /^Fail/) {
      failed = 1; gpus = gpulist(text)
    }
    next
  }
  flush()
  test = name
  if (text ~ /^Fail/) { failed = 1; gpus = gpulist(text) }
}
END { flush() }
