# tclsh report.tcl RESULTS TARGET SOURCE
# Prints harness.tcl's results as Markdown: totals per unit, the failures
# that count against the target (grouped by cause), then every test.
#
# A failure is excused when its cause is a feature that the target of
# partmap's issue 34 excuses, or when the test also uses one (its body names
# DEBUG, OBJECT, DUMP/RESTORE, replication, AOF or another database): such a
# test cannot pass on partmap whatever else it checks. A test that may store
# a binary value (randomValue) is excused only when one was refused: whether
# it stores one depends on the seed.

lassign $argv results target source
set excusable {DEBUG OBJECT DUMP/RESTORE replication AOF {several databases} {binary values}}

set rows {}
set let_pass [dict create]
set fd [open $results]
while {[gets $fd line] >= 0} {
    if {$line eq ""} continue
    if {[dict get $line status] eq "tolerated"} {
        dict incr let_pass "[file tail [dict get $line unit]]: [dict get $line detail]"
    } else {
        lappend rows $line
    }
}
close $fd

proc get {row key {default ""}} {
    if {[dict exists $row $key]} {return [dict get $row $key]}
    return $default
}

# outcome: passed, failed, excused or skipped, and why.
proc outcome {row} {
    global excusable
    set status [get $row status]
    set cause [get $row cause]
    if {$status ne "failed"} {return [list $status $cause]}
    if {$cause in $excusable} {return [list excused $cause]}
    foreach u [get $row uses] {
        if {$u in $excusable && $u ne "binary values"} {return [list excused "uses $u; failed first at: $cause"]}
    }
    return [list failed $cause]
}

proc cell {s {max 400}} {
    set s [string map {| \\| \n " " \r ""} $s]
    # Binary values of the fuzz tests would garble the table.
    regsub -all {[^\x20-\x7e]} $s "?" s
    regsub -all {\s+} $s " " s
    if {[string length $s] > $max} {set s "[string range $s 0 $max-1]…"}
    return $s
}

puts "# Redis's hash tests against $target"
puts ""
puts "Tests from $source, run by internal/redistest/hashsuite/run.sh."
puts ""
puts "| unit | tests | passed | failed | excused failures | skipped | errors outside tests |"
puts "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
set units {}
foreach row $rows {
    set u [get $row unit]
    if {$u ni $units} {lappend units $u}
    lassign [outcome $row] o
    if {[get $row status] eq "error"} {set o error}
    dict incr count($u) $o
}
set grand [dict create]
foreach u $units {
    set c $count($u)
    foreach k {passed failed excused skipped error} {
        if {![dict exists $c $k]} {dict set c $k 0}
        dict incr grand $k [dict get $c $k]
    }
    set n [expr {[dict get $c passed] + [dict get $c failed] + [dict get $c excused] + [dict get $c skipped]}]
    dict incr grand n $n
    puts "| $u | $n | [dict get $c passed] | [dict get $c failed] | [dict get $c excused] | [dict get $c skipped] | [dict get $c error] |"
}
if {[llength $units] > 1} {
    puts "| all | [dict get $grand n] | [dict get $grand passed] | [dict get $grand failed] | [dict get $grand excused] | [dict get $grand skipped] | [dict get $grand error] |"
}

puts ""
puts "## Failures that count against the target, by cause"
set bycause [dict create]
foreach row $rows {
    lassign [outcome $row] o why
    if {$o eq "failed" || [get $row status] eq "error"} {dict lappend bycause $why $row}
}
if {[dict size $bycause] == 0} {puts "\nNone."}
foreach cause [lsort [dict keys $bycause]] {
    puts ""
    puts "### $cause ([llength [dict get $bycause $cause]])"
    puts ""
    foreach row [dict get $bycause $cause] {
        set line [get $row line]
        if {$line ne ""} {set line " (line $line)"}
        puts "- [get $row unit]: **[cell [get $row name] 200]**$line"
        if {[get $row at] ne ""} {puts "  at line [cell [get $row at] 300]"}
        puts "  `[cell [get $row detail] 600]`"
    }
}

puts ""
puts "## Let pass outside tests"
puts ""
if {[dict size $let_pass] == 0} {puts "Nothing."}
dict for {what n} $let_pass {
    puts "- [cell $what 300] ($n times)"
}

puts ""
puts "## Every test"
puts ""
puts "| unit | line | test | result | why | at line | detail |"
puts "| --- | ---: | --- | --- | --- | --- | --- |"
foreach row $rows {
    lassign [outcome $row] o why
    if {[get $row status] eq "error"} {set o error}
    set detail [get $row detail]
    if {$o in {passed skipped}} {set detail ""}
    if {$o eq "passed" && [llength [get $row tolerated]]} {set why "tolerated: [join [get $row tolerated] {; }]"}
    puts "| [file tail [get $row unit]] | [get $row line] | [cell [get $row name] 120] | $o | [cell $why 160] | [cell [get $row at] 120] | [cell $detail 240] |"
}
