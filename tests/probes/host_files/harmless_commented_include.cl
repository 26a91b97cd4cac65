#if 0
// #include "@SECRET@"
#endif
