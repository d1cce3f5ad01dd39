module github.com/dlockgo/dlock/etcdlock

go 1.26.0

replace github.com/dlockgo/dlock => ../
