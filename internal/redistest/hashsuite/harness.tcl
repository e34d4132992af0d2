# Sourced by Redis's own test client (tests/test_helper.tcl, external mode)
# in place of a unit file: run.sh passes its path to --single. It adapts the
# runner to a server that is not Redis, runs the unit named by
# $HASHSUITE_UNIT unchanged, and appends one Tcl dict per test to
# $HASHSUITE_RESULTS for report.tcl.
#
# What it changes in the runner, and why:
# - Block tags external:skip and needs:debug are ignored. Redis puts them on
#   whole blocks (all of hash-field-expire.tcl) of which most tests need
#   neither; each test runs, and one that does need DEBUG fails at DEBUG and
#   is reported so. A test's own needs:debug tag, and any other needs:* tag
#   on a test or its blocks, skips as usual.
# - A skipped block's tests are listed by name (read from its source), so
#   that every test appears in the results.
# - Before each block, FLUSHALL; if the server refuses it, every key is
#   deleted with SCAN and DEL instead. FUNCTION FLUSH and CONFIG GET *,
#   which the runner sends before each block, may fail.
# - CONFIG SET and GET of hash-max-listpack-* and hash-max-ziplist-*, which
#   only choose Redis's internal encoding (unchecked under
#   --ignore-encoding), may fail; so may MEMORY USAGE in Redis's helper
#   memory_usage, which answers 1 then, as it does for other allocators.
#   What was let pass is recorded. Nothing else is tolerated.
# - A block whose overrides (CONFIG SET appendonly yes, say) are refused is
#   skipped, its tests listed; inside a test, the refusal fails the test.
# - An error in a block's code outside any test is a row of its own, and the
#   tests the block did not reach are listed as not run.

namespace eval ::hashsuite {
    variable unit $::env(HASHSUITE_UNIT)
    variable out [open $::env(HASHSUITE_RESULTS) a]
    variable in_test 0
    variable tolerated {}
    variable seq 0
    variable names {}
    variable last_line 0
    # Where each test is in the unit's source: {line pattern ...}, the
    # pattern a regexp of its name with variables and commands as .*.
    variable sources {}
    # Features the target of partmap's issue 34 excuses, and how a test
    # body shows that it uses one.
    variable uses {
        DEBUG               {(?i)(\mr|\$\w+)\s+(-?\d+\s+)?debug\M}
        OBJECT              {(?i)(\mr|\$\w+)\s+(-?\d+\s+)?object\s}
        DUMP/RESTORE        {(?i)(\mr|\$\w+)\s+(-?\d+\s+)?(dump|restore)\M}
        replication         {(?i)replicaof|slaveof|attach_to_replication_stream|wait_for_ofs_sync|\$\w+\s+wait\s}
        AOF                 {(?i)appendonly|aof}
        {several databases} {(?i)(\mr|\$\w+)\s+(-?\d+\s+)?(select\s+[1-9]|move\s|swapdb)}
        {binary values}     {randomValue|randstring[^\]]*binary}
    }
}

if {[info exists ::env(HASHSUITE_SEED)]} {
    expr {srand($::env(HASHSUITE_SEED))}
}

proc ::hashsuite::record {row} {
    variable out
    variable unit
    variable seq
    dict set row unit $unit
    dict set row seq [incr seq]
    if {![dict exists $row line] && [dict get $row status] ne "tolerated"} {
        dict set row line [line_of [dict get $row name]]
    }
    lappend ::hashsuite::names [dict get $row name]
    puts $out $row
    flush $out
}

# The features of the excused list that a test body uses.
proc ::hashsuite::uses_of {code} {
    variable uses
    set found {}
    foreach {feature re} $uses {
        if {[regexp $re $code]} {lappend found $feature}
    }
    return $found
}

# A regexp of the names that the source text of a test's name gives.
proc ::hashsuite::name_pattern {template} {
    set re ""
    foreach piece [regexp -all -inline {\$\{?\w+\}?|\[[^\]]*\]|[^$\[]+|.} $template] {
        if {[string length $piece] > 1 && [string index $piece 0] in {$ [}} {
            append re {.*}
        } else {
            append re [regsub -all {[][{}()*+?.\\^$|]} $piece {\\&}]
        }
    }
    return "^$re\$"
}

proc ::hashsuite::read_sources {file} {
    variable sources
    set fd [open $file]
    set n 0
    while {[gets $fd text] >= 0} {
        incr n
        if {[regexp {^\s*test\s+(\{[^\n]*?\}|"[^"\n]*")} $text _ name]} {
            lappend sources $n [name_pattern [string range $name 1 end-1]]
        }
    }
    close $fd
}

# The line of the test named name: the first that matches after the
# previous test's, else the first that matches (a loop runs its tests
# again; two tests may share a name).
proc ::hashsuite::line_of {name} {
    variable sources
    variable last_line
    set first ""
    foreach {n re} $sources {
        if {![regexp $re $name]} continue
        if {$first eq ""} {set first $n}
        if {$n > $last_line} {
            set last_line $n
            return $n
        }
    }
    if {$first ne ""} {set last_line $first}
    return $first
}

# The names of the tests in a block's source, with the caller's variables
# substituted where they can be (a name made in a loop appears once).
proc ::hashsuite::static_tests {code level} {
    set names {}
    foreach {_ name} [regexp -all -inline -line {^\s*test\s+(\{[^\n]*?\}|"[^"\n]*")} $code] {
        set name [string range $name 1 end-1]
        if {[catch {uplevel $level [list subst -nocommands $name]} subst] == 0} {
            set name $subst
        }
        lappend names $name
    }
    return $names
}

# level is the block's frame, as #N.
proc ::hashsuite::skip_block {code level reason} {
    foreach name [static_tests $code $level] {
        send_data_packet $::test_server_fd ignore "$name: $reason"
        record [dict create name $name status skipped cause $reason detail "its block is skipped"]
    }
}

# tags_acceptable as in tests/support/server.tcl, with the policy above.
proc tags_acceptable {tags err_return} {
    upvar $err_return err
    if {[llength $::allowtags] > 0} {
        set matched 0
        foreach tag $::allowtags {
            if {[lsearch $tags $tag] >= 0} {incr matched}
        }
        if {$matched < 1} {
            set err "Tag: none of the tags allowed"
            return 0
        }
    }
    foreach tag $tags {
        if {$tag eq "needs:debug" && $::hashsuite::in_test && $tag in [dict get $::hashsuite::current own_tags]} {
            set err "Tag: needs:debug"
            return 0
        }
        if {$tag in {external:skip needs:debug}} continue
        if {$tag in $::denytags || [string match needs:* $tag]} {
            set err "Tag: $tag"
            return 0
        }
        if {$tag eq "large-memory" && !$::large_memory} {
            set err "Tag: large-memory (no --large-memory)"
            return 0
        }
        if {$tag eq "singledb:skip" && $::singledb} {
            set err "Tag: singledb:skip"
            return 0
        }
        if {$tag eq "experimental" && [lsearch $::allowtags experimental] == -1} {
            set err "Tag: experimental"
            return 0
        }
    }
    return 1
}

# start_server and tags as in tests/support/server.tcl for an external
# server, listing a skipped block's tests. They pass the block's code on as
# it is, so that the runner's messages keep its file and line.
proc start_server {options {code undefined}} {
    set tags {}
    set overrides {}
    foreach {option value} $options {
        switch $option {
            tags {set tags [string map {\" ""} $value]}
            overrides {set overrides [concat $overrides $value]}
        }
    }
    set ::tags [concat $::tags $tags]
    if {[tags_acceptable $::tags err]} {
        run_external_server_test $code $overrides
    } else {
        ::hashsuite::skip_block $code #[expr {[info level] - 1}] $err
    }
    set ::tags [lrange $::tags 0 end-[llength $tags]]
}

proc tags {tags code} {
    set tags [string map {\" ""} $tags]
    set ::tags [concat $::tags $tags]
    if {[tags_acceptable $::tags err]} {
        uplevel 1 $code
    } else {
        ::hashsuite::skip_block $code #[expr {[info level] - 1}] $err
    }
    set ::tags [lrange $::tags 0 end-[llength $tags]]
}

# What the harness let pass: kept with the test, or a row of its own
# outside tests.
proc ::hashsuite::tolerate {what} {
    variable in_test
    variable tolerated
    if {$in_test} {
        lappend tolerated $what
    } else {
        record [dict create name "(outside any test)" status tolerated detail $what]
    }
}

proc ::hashsuite::clean_keyspace {} {
    if {[catch {r flushall} err] == 0} return
    tolerate "FLUSHALL refused ($err): deleted every key with SCAN and DEL"
    for {set pass 0} {[r dbsize] > 0} {incr pass} {
        if {$pass == 10} {error "could not empty the keyspace with SCAN and DEL"}
        set cursor 0
        while 1 {
            lassign [r scan $cursor count 1000] cursor keys
            if {[llength $keys]} {r del {*}$keys}
            if {$cursor == 0} break
        }
    }
}

# run_external_server_test as in tests/support/server.tcl, tolerating what
# the header says; an error inside a test fails that test.
proc run_external_server_test {code overrides} {
    set srv {}
    dict set srv "host" $::host
    dict set srv "port" $::port
    set client [redis $::host $::port 0 $::tls]
    dict set srv "client" $client
    if {!$::singledb} {
        $client select 9
    }
    dict set srv "config" [dict create port $::port]
    lappend ::servers $srv

    set names_before [llength $::hashsuite::names]
    set failed [catch {
        ::hashsuite::clean_keyspace
        catch {r function flush}
        set saved_config {}
        catch {
            foreach {param val} [r config get *] {dict set saved_config $param $val}
        }
        foreach {param val} $overrides {
            if {[catch {r config set $param $val} err]} {
                if {$::hashsuite::in_test} {error "start_server needs CONFIG SET $param $val: $err"}
                ::hashsuite::skip_block $code #[expr {[info level] - 2}] "its block needs CONFIG SET $param $val: $err"
                set code {}
                break
            }
            if {$param == "appendonly" && $val == "yes"} {
                waitForBgrewriteaof r
            }
        }
        uplevel 2 $code
        dict for {param val} $saved_config {
            catch {r config set $param $val}
        }
    } error options]

    set srv [lpop ::servers]
    [dict get $srv "client"] close
    if {$failed} {
        if {$::hashsuite::in_test} {
            return -options $options $error
        }
        set msg [lindex [split [dict get $options -errorinfo] \n] 0]
        set cmd [::hashsuite::raising_command [dict get $options -errorinfo]]
        ::hashsuite::record [dict create name "(a block's code, outside any test)" status error \
            cause [::hashsuite::cause_of error $msg $cmd] detail "$msg (from $cmd)"]
        foreach name [::hashsuite::static_tests $code #[expr {[info level] - 2}]] {
            if {$name ni [lrange $::hashsuite::names $names_before end]} {
                ::hashsuite::record [dict create name $name status error cause "not run: its block stopped" \
                    detail "named in the block's source; $msg"]
            }
        }
    }
}

# CONFIG SET and GET of the parameters that only choose Redis's encoding:
# a refused SET answers OK, a refused GET answers nothing (as Redis does
# for a parameter it does not know).
rename r ::hashsuite::r
proc r {args} {
    set words $args
    if {[string is integer -strict [lindex $words 0]]} {set words [lrange $words 1 end]}
    set op [string tolower [lrange $words 0 1]]
    if {$op in {{config set} {config get}}
        && [regexp {^hash-max-(listpack|ziplist)-(entries|value)$} [string tolower [lindex $words 2]]]} {
        if {[catch {uplevel 1 [list ::hashsuite::r {*}$args]} res]} {
            ::hashsuite::tolerate "[string toupper $op] [lrange $words 2 end] refused ($res)"
            if {$op eq "config set"} {return OK}
            return {}
        }
        return $res
    }
    uplevel 1 [list ::hashsuite::r {*}$args]
}

# Redis's own helper answers 1 where the figure means nothing (another
# allocator); so does this one where the server has no MEMORY USAGE.
rename memory_usage ::hashsuite::memory_usage
proc memory_usage {key} {
    if {[catch {::hashsuite::memory_usage $key} usage]} {
        ::hashsuite::tolerate "MEMORY USAGE refused ($usage): taken as 1"
        return 1
    }
    return $usage
}

# The command that raised an error, from its errorInfo: the innermost one
# that a test wrote (r ..., or $client ...).
proc ::hashsuite::raising_command {info} {
    foreach {_ cmd} [regexp -all -inline {(?:while executing|invoked from within)\n"([^\n]*)"} $info] {
        regsub {^::hashsuite::r } $cmd {r } cmd
        if {[regexp {^(r|\$\w+) } $cmd]} {return $cmd}
    }
    return ""
}
# Why a test failed: an excused feature, a limit of the server, a missing
# command, an error reply to a command, or an assertion.
proc ::hashsuite::cause_of {kind msg cmd} {
    set words $cmd
    if {[catch {llength $words}]} {set words [split $cmd]}
    if {[regexp {^(r|\$\w+)$} [lindex $words 0]]} {set words [lrange $words 1 end]}
    if {[string is integer -strict [lindex $words 0]]} {set words [lrange $words 1 end]}
    set verb [string toupper [lindex $words 0]]
    set arg [string tolower [lindex $words 1]]
    if {[string match -nocase "*UTF-8*" $msg]} {return "binary values"}
    if {[regexp {^start_server needs CONFIG SET (\S+)} $msg _ param]} {
        if {$param eq "appendonly"} {return AOF}
        return "start_server needs CONFIG SET $param"
    }
    switch -- $verb {
        DEBUG {return DEBUG}
        OBJECT {return OBJECT}
        DUMP - RESTORE {return DUMP/RESTORE}
        REPLICAOF - SLAVEOF - SYNC - PSYNC - WAIT {return replication}
        MOVE - SWAPDB {return "several databases"}
        SELECT {if {$arg ne "0"} {return "several databases"}}
        BGREWRITEAOF {return AOF}
        CONFIG {
            if {$arg eq "set" && [string tolower [lindex $words 2]] eq "appendonly"} {return AOF}
        }
    }
    if {$kind eq "assertion"} {return "assertion"}
    if {[regexp {has \d+ fields; the limit is} $msg]} {return "limit: fields per hash"}
    if {[regexp {field name is \d+ bytes; the limit is} $msg]} {return "limit: field name bytes"}
    if {[regexp {is \d+ bytes; the limit is} $msg]} {return "limit: value bytes"}
    if {[regexp {unknown command '([^']*)'} $msg _ name]} {
        set sub ""
        if {[string toupper $name] in {CONFIG OBJECT MEMORY FUNCTION CLIENT}} {set sub " [string toupper $arg]"}
        return "missing command [string toupper $name]$sub"
    }
    if {$verb ne ""} {return "error reply to $verb"}
    # Often an earlier test's failure: the test uses what it left.
    return "Tcl error in the test"
}

# The file line and text of the statement of a test's body (which starts
# at line) that an errorInfo comes from.
proc ::hashsuite::statement_of {info line} {
    if {[regexp {"([^\n]*)"\n\s*\("uplevel" body line (\d+)\)\n\s*invoked from within\n"uplevel 1 \$code"} $info _ stmt n]} {
        return "[expr {$line + $n - 1}]: $stmt"
    }
    return ""
}

# What the runner recorded for a failed test, as cause, detail and at (the
# statement at fault). info is the errorInfo of the test's failure.
proc ::hashsuite::failure {details line info} {
    if {[llength $details] >= 3} {
        # An error, not an assertion: the runner kept its errorInfo.
        set info [lindex $details 2]
        set msg [lindex [split $info \n] 0]
        set cmd [raising_command $info]
        return [dict create cause [cause_of error $msg $cmd] detail "$msg (from $cmd)" at [statement_of $info $line]]
    }
    set msg [lindex $details 1]
    set at ""
    if {[regexp {^Expected '(.*)' to equal or match '(.*)'$} $msg _ want got]} {
        set msg "the test returned '$got' where it expects '$want'"
        set at "$line: the test's result"
    } elseif {[regexp {\(context: type eval line (\d+) cmd \{(.*?)\} (proc|level) } $msg _ n stmt]} {
        set at "[expr {$line + $n - 1}]: $stmt"
    } else {
        set at [statement_of $info $line]
    }
    regsub { \(context: .*} $msg "" msg
    return [dict create cause [cause_of assertion $msg ""] detail $msg at $at]
}

# test runs as the runner's own (tailcall keeps its frame where the runner
# expects it, and the test's code keeps its file and line); a trace on the
# runner's test records the outcome when it returns.
rename test ::hashsuite::test
proc test {name code {okpattern undefined} {tags {}}} {
    set ::hashsuite::current [dict create name $name line [::hashsuite::line_of $name] tags [concat $::tags $tags] \
        own_tags $tags uses [::hashsuite::uses_of $code] start [clock milliseconds] \
        counts [list $::num_passed $::num_failed $::num_skipped]]
    set ::hashsuite::tolerated {}
    set ::hashsuite::in_test 1
    tailcall ::hashsuite::test $name $code $okpattern $tags
}

proc ::hashsuite::after_test {command code result op} {
    variable current
    variable tolerated
    variable in_test
    set row $current
    lassign [dict get $row counts] passed failed skipped
    dict set row ms [expr {[clock milliseconds] - [dict get $row start]}]
    set row [dict remove $row counts start own_tags]
    dict set row tolerated $tolerated
    if {$code == 1} {
        # Not even --durable caught it: the runner will stop.
        dict set row status failed
        dict set row cause [cause_of error $result [raising_command $::errorInfo]]
        dict set row detail $::errorInfo
    } elseif {$::num_passed > $passed} {
        dict set row status passed
    } elseif {$::num_failed > $failed} {
        dict set row status failed
        set row [dict merge $row [failure [lindex $::tests_failed end] [dict get $row line] $::errorInfo]]
    } elseif {$::num_skipped > $skipped} {
        dict set row status skipped
        dict set row cause "not selected (--only or --skiptest)"
    } else {
        dict set row status skipped
        tags_acceptable [dict get $current tags] why
        dict set row cause $why
    }
    set in_test 0
    record $row
}
trace add execution ::hashsuite::test leave ::hashsuite::after_test

set ::curfile tests/$::hashsuite::unit.tcl
::hashsuite::read_sources $::curfile
source $::curfile
close $::hashsuite::out
