package main

// sysSetns is setns(2) on amd64 (the syscall package does not name it).
const sysSetns = 308
