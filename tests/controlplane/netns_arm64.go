package main

// sysSetns is setns(2) on arm64 (the syscall package does not name it).
const sysSetns = 268
