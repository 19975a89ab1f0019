# Allocation-heavy Perl for bench/heap_real.py: strings, small hashes and arrays, most of
# them garbage soon (Debian's perl uses the C library's malloc). 1,500,000 iterations (the
# default) make about 7.5 M allocations with Debian's perl 5.36.
my $n = shift // 1500000;
my %keep;
my $total = 0;
for my $i (1 .. $n) {
    my $s = "$i-" . ($i % 97);
    my %t = (s => $s, i => $i, name => [$s, $i]);
    $keep{$i % 5000} = \%t;
    $total += length($s);
}
print "$total\n";
