module stk

go 1.19
