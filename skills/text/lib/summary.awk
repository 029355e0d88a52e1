# Extractive summary by sentence scoring (Luhn-style), for scripts/summary.sh.
#
# Input: the text on stdin. Variable n: how many sentences to keep.
# Output, tab-separated, one record per line:
#   total <TAB> <number of sentences>
#   <index> <TAB> <score> <TAB> <sentence>     for the n best sentences, in text order
#
# A sentence ends at . ! or ? followed by white space, or at a blank line. A sentence's score is
# the sum of the frequencies of its content words (not stop words, at least 3 letters), each
# divided by the highest frequency, over the square root of the sentence's length in words. Ties
# keep the earlier sentence. Words are ASCII letters and digits, lower-cased, with a plural `s`
# dropped (`cats` counts as `cat`).

BEGIN {
    split("the and for are but not you all any can had her was one our out has him his how its may " \
          "new now old see two who did get let say she too use that with have this will your from they " \
          "been were said each which their there what about would when make like than then them these " \
          "some into more other could only also its very just over such most both many well after where " \
          "while should because those being does here what whom why shall upon onto", sw, " ")
    for (i in sw) stop[sw[i]] = 1
    buf = ""; count = 0
}

function stem(word) {
    if (length(word) > 3 && word ~ /[^s]s$/) return substr(word, 1, length(word) - 1)
    return word
}

function flush(   s) {
    s = buf
    gsub(/^[ ]+|[ ]+$/, "", s)
    if (s != "") sentence[++count] = s
    buf = ""
}

{
    line = $0
    gsub(/[\t\r]/, " ", line)
    if (line ~ /^[ ]*$/) { flush(); next }
    buf = buf " " line
    # Cut every complete sentence off the front of the buffer.
    while (match(buf, /[.!?]+["')\]]*[ ]+/)) {
        piece = substr(buf, 1, RSTART + RLENGTH - 1)
        rest = substr(buf, RSTART + RLENGTH)
        buf = piece; flush(); buf = rest
    }
}

END {
    flush()
    max = 0
    for (i = 1; i <= count; i++) {
        nw[i] = split(tolower(sentence[i]), w, /[^a-z0-9]+/)
        words[i] = 0
        for (j = 1; j <= nw[i]; j++) {
            if (w[j] == "") continue
            words[i]++
            if (length(w[j]) < 3 || (w[j] in stop)) continue
            t = stem(w[j])
            freq[t]++
            if (freq[t] > max) max = freq[t]
        }
    }
    for (i = 1; i <= count; i++) {
        split(tolower(sentence[i]), w, /[^a-z0-9]+/)
        sum = 0
        for (j = 1; j <= nw[i]; j++)
            if (length(w[j]) >= 3 && !(w[j] in stop)) sum += freq[stem(w[j])] / max
        score[i] = words[i] > 0 ? sum / sqrt(words[i]) : 0
    }
    # Pick the n best (selection; n is small), then print them in text order.
    for (k = 1; k <= n && k <= count; k++) {
        best = 0
        for (i = 1; i <= count; i++)
            if (!(i in picked) && (best == 0 || score[i] > score[best])) best = i
        picked[best] = 1
    }
    print "total\t" count
    for (i = 1; i <= count; i++)
        if (i in picked) printf "%d\t%.4f\t%s\n", i, score[i], sentence[i]
}
