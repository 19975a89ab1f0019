# A deterministic text file of pseudo-random words (Park-Miller generator, exact in the
# doubles every awk uses): compressible like logs or source code, not trivially so.
# awk -v lines=N -f text.awk
BEGIN {
    split("the of and to in is for that with on as by this from at be are or an it was " \
        "sensor value reading timeout buffer packet frame device driver kernel board " \
        "error warning status ready init config update thread queue event handler", words, " ")
    nw = length(words)
    x = 20240601
    if (lines == "") lines = 100000
    for (i = 1; i <= lines; i++) {
        n = 6 + i % 9
        line = sprintf("%08d", i)
        for (j = 0; j < n; j++) {
            x = (x * 16807) % 2147483647
            w = words[1 + x % nw]
            if (x % 13 == 0) w = w sprintf("%d", x % 1000)
            line = line " " w
        }
        print line
    }
}
