module github.com/mrtr-go/mrtr

go 1.26
