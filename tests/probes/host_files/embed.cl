__constant char planted[] = {
#embed "@SECRET@"
};
