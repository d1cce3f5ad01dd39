module github.com/dlockgo/dlock/faults

go 1.26.0

replace github.com/dlockgo/dlock => ../
