# A deterministic directory tree of text files for ripgrep: `files` files of `lines` lines of
# pseudo-random words (Park-Miller generator), under tree/dNN/.
# awk -v files=N -v lines=M -f tree.awk   (run in the directory that gets tree/)
BEGIN {
    split("the of and to in is for that with on as by this from at be are or an it was " \
        "sensor value reading timeout buffer packet frame device driver kernel board " \
        "error warning status ready init config update thread queue event handler " \
        "running waiting loading parsing writing", words, " ")
    nw = length(words)
    x = 424242
    for (f = 0; f < files; f++) {
        dir = sprintf("tree/d%02d", f % 20)
        if (f < 20) system("mkdir -p " dir)
        path = sprintf("%s/f%04d.txt", dir, f)
        for (i = 0; i < lines; i++) {
            line = sprintf("%06d", i)
            for (j = 0; j < 8 + i % 7; j++) {
                x = (x * 16807) % 2147483647
                w = words[1 + x % nw]
                if (x % 11 == 0) w = w sprintf("%d", x % 10000)
                line = line " " w
            }
            print line > path
        }
        close(path)
    }
}
