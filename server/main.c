/* kubeleased (the RPC helper fills this in). */
int main(void)
{
    return 0;
}
