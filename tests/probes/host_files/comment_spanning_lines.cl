/*
*/ #include "@SECRET@"
