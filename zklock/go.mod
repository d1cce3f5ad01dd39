module github.com/dlockgo/dlock/zklock

go 1.26.0

replace github.com/dlockgo/dlock => ../
