module github.com/mrtr-go/mrtr/bench

go 1.26.0

require (
	github.com/go-jose/go-jose/v4 v4.1.9
	github.com/gorilla/securecookie v1.1.2
	github.com/mrtr-go/mrtr v0.0.0-00010101000000-000000000000
)

replace github.com/mrtr-go/mrtr => ../
