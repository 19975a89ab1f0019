# A deterministic build.ninja: `edges` generated sources, each compiled with a few implicit
# dependencies on generated headers, archives of 100 objects, and a link of the archives.
# Every input is itself built, so a dry run (-n) plans the whole graph.
# awk -v edges=N -f ninja.awk
BEGIN {
    if (edges == "") edges = 20000
    print "cflags = -O2 -g -Wall"
    print "rule cc"
    print "  command = gcc $cflags -MD -MF $out.d -c $in -o $out"
    print "  description = CC $out"
    print "rule gen"
    print "  command = python3 gen.py $out"
    print "  description = GEN $out"
    print "rule ar"
    print "  command = ar rcs $out $in"
    print "  description = AR $out"
    print "rule link"
    print "  command = gcc -o $out $in"
    print "  description = LINK $out"
    for (h = 0; h < 200; h++)
        printf "build gen/h%03d.h: gen\n", h
    libs = ""
    for (i = 0; i < edges; i++) {
        d = int(i / 100)
        printf "build src/d%03d/f%05d.c: gen || gen/h%03d.h\n", d, i, i % 200
        printf "build obj/d%03d/f%05d.o: cc src/d%03d/f%05d.c | gen/h%03d.h gen/h%03d.h gen/h%03d.h\n",
            d, i, d, i, i % 200, (i * 7) % 200, (i * 13) % 200
        if (i % 100 == 99) {
            line = sprintf("build lib/lib%03d.a: ar", d)
            for (j = i - 99; j <= i; j++) line = line sprintf(" obj/d%03d/f%05d.o", d, j)
            print line
            libs = libs sprintf(" lib/lib%03d.a", d)
        }
    }
    print "build bin/app: link" libs
    print "build all: phony bin/app"
    print "default all"
}
