// Package mysqllock006 runs the propertytest suite on go-mysql-lock v0.0.6,
// whose connection leak (upstream issue #9) used to hang the suite until
// go test's timeout. It is a module of its own because the main module
// requires v0.0.7; run it with
//
//	cd propertytest/thirdparty/mysqllock006 && go test ./...
package mysqllock006
