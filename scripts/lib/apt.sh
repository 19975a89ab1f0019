# Sourced by the setup scripts: the one place that installs Debian packages. Only the setup
# step (scripts/setup.sh, scripts/test-setup.sh and the setup scripts they run) calls
# apt_ensure; a test or a script a test runs calls apt_require, which never changes the machine.

# Sets the array `need` to the packages of "$@" that are not installed.
apt_missing() {
    local p
    need=()
    for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
}

# Installs the packages of "$@" that are missing (none: no apt at all). $APT_WHO names the
# caller in the one line it prints.
apt_ensure() {
    local need sudo=""
    apt_missing "$@"
    [ ${#need[@]} -eq 0 ] && return 0
    echo "${APT_WHO:-setup}: installing ${need[*]}" >&2
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    # dpkg sometimes complains about a vanished archive on the first try; once more with -f.
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null ||
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -f -y -qq --no-install-recommends "${need[@]}" >/dev/null
}

# Fails, naming the missing packages and the setup command, when any of "$@" is not installed.
apt_require() {
    local need
    apt_missing "$@"
    [ ${#need[@]} -eq 0 ] && return 0
    echo "${APT_WHO:-setup}: missing Debian packages ${need[*]}: run scripts/test-setup.sh (scripts/test.sh runs it)" >&2
    return 1
}
